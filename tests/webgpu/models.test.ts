/**
 * Whole models on the webgpu device (tests/models/device_models.ts: GPT-2 and its LoRA adapter vs
 * PyTorch, lora_linear, AdamW vs the js backend).
 */
import { WEBGPU } from "../backends.ts";
import { describeModelsOn } from "../models/device_models.ts";

// first use of each kernel compiles it (lavapipe: up to seconds)
describeModelsOn("webgpu", WEBGPU, { timeout: 120_000 });
