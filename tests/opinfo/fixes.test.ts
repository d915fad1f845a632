/**
 * Regression tests for the mismatches the OpInfo suite found and that were fixed locally
 * (each also covered by its OpInfo sample in opinfo.test.ts). Expected values are PyTorch 1.13's,
 * quoted in comments, on every backend.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";

function suite(device: string) {
  const t = (data: any, dtype: loom.DType) => loom.tensor(data, { dtype, device });

  test("gelu rejects an unknown approximate (torch: RuntimeError)", () => {
    const x = t([1, 2], "float32");
    expect(() => loom.gelu(x, "asdf" as any)).toThrow("[gelu] approximate argument must be either none or tanh, got 'asdf'");
    expect(() => loom.gelu(x.lazy(), "asdf" as any)).toThrow(loom.LoomValueError);
  });
}

describe.each(BACKENDS)("opinfo fixes on %s", (backend) => {
  useBackend(backend);
  suite("cpu");
});
describe.if(WEBGPU)("opinfo fixes on webgpu", () => suite("webgpu"));
