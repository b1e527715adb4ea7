/**
 * When the HTTP/1.1 client's requests go out. A turn's requests are written together after its
 * other events (setImmediate): waking an upstream on the same core hands it the core, better after
 * the turn than mid-turn. A request on a connection taken from the pool goes out a turn later,
 * after the event loop has polled its socket once more (in Bun, as in Node, an immediate set while
 * immediates run waits for the next poll): whatever the upstream sent while the connection sat
 * idle is read by then, before the request, and so can never be taken for its answer.
 */
import type { RequestWriter } from "./http1-types";

let writeNow: RequestWriter[] = [];
let writeNextTurn: RequestWriter[] = [];
let scheduled = false;

export function queueWrite(conn: RequestWriter, from: "new" | "pool"): void {
  if (from === "new") writeNow.push(conn);
  else writeNextTurn.push(conn);
  if (!scheduled) {
    scheduled = true;
    setImmediate(writeQueued);
  }
}

function writeQueued(): void {
  const batch = writeNow;
  writeNow = writeNextTurn;
  writeNextTurn = [];
  for (const conn of batch) conn.writeRequest();
  scheduled = writeNow.length > 0;
  if (scheduled) setImmediate(writeQueued);
}
