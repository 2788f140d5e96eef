// nsyslog-parser ships no type declarations; this is the part netmon uses.
declare module "nsyslog-parser" {
  function parse(
    line: string,
    opts?: { cef?: boolean; fields?: boolean; pid?: boolean },
  ): Record<string, unknown>;
  export default parse;
}
