/**
 * The schedulers of `optim.lr_scheduler` (torch.optim.lr_scheduler), gathered from lr_scheduler.ts
 * and the files of the larger ones (they import LRScheduler from lr_scheduler.ts, so it cannot
 * re-export them without an import cycle).
 */
export {
  SchedulerBase, LRScheduler, LambdaLR, StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, SequentialLR,
  type SchedulerStateDict, get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup,
} from "./lr_scheduler.ts";
export { OneCycleLR, type OneCycleLROptions, type OneCyclePhase } from "./lr_scheduler_onecycle.ts";
export { ReduceLROnPlateau, type ReduceLROnPlateauOptions } from "./lr_scheduler_plateau.ts";
