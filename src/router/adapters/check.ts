/** A compiled TypeBox check of a JSON body, refusing with the first violation (../../validation.ts). */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { TObject } from "@sinclair/typebox";
import { violationError } from "../../validation";
import type { CallBody } from "./types";

export function jsonChecker(schema: TObject): (body: unknown) => asserts body is CallBody {
  const checker = TypeCompiler.Compile(schema);
  return (body: unknown): asserts body is CallBody => {
    if (!checker.Check(body)) throw violationError(checker.Errors(body).First());
  };
}
