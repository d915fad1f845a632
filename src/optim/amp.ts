/**
 * loom.amp: automatic mixed precision (torch.amp): `autocast` regions that run matmuls in
 * bfloat16/float16 with float32 master weights (lazy/autocast.ts), and `GradScaler` for float16
 * gradients (grad_scaler.ts).
 */
export {
  autocast, AutocastGuard, get_autocast_dtype, is_autocast_enabled, FP32_OPS, LOWER_PRECISION_OPS,
  type AutocastDevice, type AutocastDtype, type AutocastOptions,
} from "../lazy/autocast.ts";
export { GradScaler, type GradScalerOptions, type GradScalerStateDict } from "./grad_scaler.ts";
