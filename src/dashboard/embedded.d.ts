// The dashboard's stylesheet and client script, embedded as text by `bun build --compile`.
declare module "*/style.css" {
  const text: string;
  export default text;
}
declare module "*/app.js" {
  const text: string;
  export default text;
}
