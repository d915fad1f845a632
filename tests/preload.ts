/**
 * Loaded before every test file (bunfig.toml): the suite runs with tolerance "exact", so the
 * eager == lazy bit-for-bit tests see only exact kernels. Tests of bounded implementations
 * (tests/catalog/) name their tolerance explicitly.
 */
import { set_compiler_options } from "../src/scheduler/options.ts";

set_compiler_options({ tolerance: "exact" });
