/**
 * Group commit per event-loop turn: the writes asked for during one turn are handed together to
 * `writeAll` (which runs them in one transaction) once the turn's I/O callbacks have run, and each
 * caller's promise settles when it returns: with the item's result, or, when it throws, with that
 * error for every item of the group. Under load many requests share one commit instead of paying
 * one each; a request alone waits one turn. `writeAll` returns one result per item, in order:
 * at once on SQLite, or as a promise on Postgres (one statement or transaction for the group).
 */
export type GroupCommit<I, O> = (item: I) => Promise<O>;

interface Waiting<I, O> {
  item: I;
  resolve: (result: O) => void;
  reject: (error: unknown) => void;
}

export function groupPerTurn<I, O>(writeAll: (items: I[]) => O[] | Promise<O[]>): GroupCommit<I, O> {
  let group: Array<Waiting<I, O>> = [];
  const commit = (): void => {
    const taken = group;
    group = [];
    const fail = (error: unknown): void => {
      for (const waiting of taken) waiting.reject(error);
    };
    const succeed = (results: O[]): void => taken.forEach((waiting, i) => waiting.resolve(results[i]!));
    let results: O[] | Promise<O[]>;
    try {
      results = writeAll(taken.map((waiting) => waiting.item));
    } catch (error) {
      return fail(error);
    }
    if (Array.isArray(results)) succeed(results);
    else results.then(succeed, fail);
  };
  return (item) =>
    new Promise<O>((resolve, reject) => {
      if (group.push({ item, resolve, reject }) === 1) setImmediate(commit);
    });
}
