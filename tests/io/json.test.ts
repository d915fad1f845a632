/** findDuplicateKey: the repeated-key scan behind the safetensors header check (src/io/json.ts). */
import { describe, expect, test } from "bun:test";
import { findDuplicateKey, formatJsonPath } from "../../src/io/json.ts";

describe("findDuplicateKey", () => {
  test("none: equal keys in different objects, in array elements, or inside string values", () => {
    expect(findDuplicateKey('{"a":{"a":1},"b":{"a":2}}')).toBeNull();
    expect(findDuplicateKey('[{"a":1},{"a":1}]')).toBeNull();
    expect(findDuplicateKey('{"a":"\\"a\\":{,}[","b":["a","a"]}')).toBeNull();
    expect(findDuplicateKey("[]")).toBeNull();
    expect(findDuplicateKey('"x"')).toBeNull();
  });

  test("the first repeat and the path of its object, keys decoded", () => {
    expect(findDuplicateKey('{"a":1,"a":2}')).toEqual({ key: "a", path: [] });
    expect(findDuplicateKey('{"w":{"dtype":"F32","d\\u0074ype":"I32"}}')).toEqual({ key: "dtype", path: ["w"] });
    expect(findDuplicateKey('{"x":[0,{"k":1},{"k":[],"k":{}}]}')).toEqual({ key: "k", path: ["x", 2] });
    expect(findDuplicateKey('{"a\\\\":1, "a\\\\" : 2}')).toEqual({ key: "a\\", path: [] });
    expect(formatJsonPath(["x", 2])).toBe('["x"][2]');
  });

  test("deep nesting does not overflow the stack", () => {
    const deep = "[".repeat(200_000) + '{"a":1,"a":1}' + "]".repeat(200_000);
    expect(findDuplicateKey(deep)).toEqual({ key: "a", path: new Array(200_000).fill(0) });
  });
});
