export * from './seam.js';
export * from './errors.js';
export * from './messages.js';
export * from './schemas.js';
export * from './depth.js';
export * from './output-cap.js';
