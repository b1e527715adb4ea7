/**
 * The dashboard's stylesheet and client script, embedded in the binary as text. Pages link them
 * with a content hash in the query (`?v=`), so they can be cached for good and still change
 * with every release.
 */
import STYLE from "./assets/style.css" with { type: "text" };
import SCRIPT from "./assets/app.js" with { type: "text" };

export { STYLE, SCRIPT };
export const ASSET_VERSION = Bun.hash(STYLE + SCRIPT).toString(36);
