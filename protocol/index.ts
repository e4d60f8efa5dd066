export * from './seam.js';
export * from './errors.js';
export * from './messages.js';
export * from './wire-message.js';
export * from './depth.js';
export * from './output-cap.js';
export * from './diagnostic.js';
export * from './capability-check.js';
export * from './end-event.js';
export * from './protocol-version.js';
export * from './framing.js';
export * from './json-bytes.js';
// The schema builder and the shared payload schemas stay inside protocol/: what others need is a
// message's declaration, the types derived from it and the one wording of a failure.
export type { Infer, JsonSchema, Schema } from './json-schema.js';
export { describeAjvError, describeAjvErrors, validateSessionEvent, type FailureWording, type ValidationFailure, type Validator } from './validation.js';
export * from './worktree-note.js';
