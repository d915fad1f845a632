/** Run `fn`, expecting it to throw; return the error (tests then assert its type and message). */
export function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error, none was thrown");
}
