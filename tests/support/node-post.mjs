// Run by Node, not Bun: `node node-post.mjs URL BYTES TRIES` POSTs a chat body of about BYTES with
// Node's own fetch (undici, as the openai SDK uses under Node) and prints one line per try: the
// status and error code, or the connection error.
const [url, bytes, tries] = process.argv.slice(2);
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(Number(bytes)) }] });
for (let i = 0; i < Number(tries); i++) {
  try {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
    const json = await res.json();
    console.log(res.status, json.error?.code);
  } catch (err) {
    console.log("error", err.cause?.code ?? err.message);
  }
}
