/**
 * Duplicate keys in untrusted JSON. `JSON.parse` silently keeps the last of two equal keys, so
 * `{"w": {"dtype": "F32", "dtype": "I32", ...}}` would load as I32 while another reader keeps
 * F32. The safetensors reference rejects these headers (serde: "duplicate field `dtype`"; a
 * repeated tensor name drops one entry and its byte range then fails the offset check), and
 * Loom rejects every repeated key, at every level, in every JSON file it reads from a checkpoint.
 */

/** A repeated key and where it is. */
export interface DuplicateKey {
  /** The repeated key, decoded (so "dtype" and "d\u0074ype" are the same key). */
  key: string;
  /** Keys (object members) and indices (array elements) from the root to the object holding it. */
  path: (string | number)[];
}

interface Frame {
  /** Keys seen so far; null for an array. */
  keys: Set<string> | null;
  /** The last key read (objects) or the current element index (arrays). */
  at: string | number;
  /** Where this container sits in its parent. */
  label: string | number | null;
}

const QUOTE = 0x22, BACKSLASH = 0x5c, LBRACE = 0x7b, RBRACE = 0x7d, LBRACKET = 0x5b, RBRACKET = 0x5d, COMMA = 0x2c;

/**
 * The first key that occurs twice in one object of `text`, or null.
 * @param text - JSON text that `JSON.parse` has already accepted: the scan relies on it being
 *   valid, and never throws on such text. Iterative, so nesting depth is not limited by the stack.
 */
export function findDuplicateKey(text: string): DuplicateKey | null {
  const stack: Frame[] = [];
  let expectKey = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let j = i + 1;
      let escaped = false;
      for (;;) {
        const d = text.charCodeAt(j);
        if (d === BACKSLASH) {
          escaped = true;
          j += 2;
        } else if (d === QUOTE) {
          break;
        } else {
          j++;
        }
      }
      if (expectKey) {
        const top = stack[stack.length - 1]!;
        const key: string = escaped ? JSON.parse(text.slice(i, j + 1)) : text.slice(i + 1, j);
        if (top.keys!.has(key)) return { key, path: stack.slice(1).map((f) => f.label!) };
        top.keys!.add(key);
        top.at = key;
        expectKey = false;
      }
      i = j + 1;
      continue;
    }
    if (c === LBRACE || c === LBRACKET) {
      const parent = stack[stack.length - 1];
      stack.push({ keys: c === LBRACE ? new Set() : null, at: 0, label: parent ? parent.at : null });
      expectKey = c === LBRACE;
    } else if (c === RBRACE || c === RBRACKET) {
      stack.pop();
      expectKey = false;
    } else if (c === COMMA) {
      const top = stack[stack.length - 1]!;
      if (top.keys) expectKey = true;
      else top.at = (top.at as number) + 1;
    }
    i++;
  }
  return null;
}

/** `["a"]["b"][0]`-style text for a DuplicateKey path ("" at the root). */
export function formatJsonPath(path: readonly (string | number)[]): string {
  return path.map((p) => `[${JSON.stringify(p)}]`).join("");
}
