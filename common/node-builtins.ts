/**
 * The Node built-ins the daemon's start-up uses from `node:crypto`, `node:fs`, `node:net` and
 * `node:util`, taken with `require`. An ES `import` of a built-in makes Node build an ES facade
 * that reads every export once, and that runs the lazy ones: `node:net` then loads BlockList and
 * SocketAddress, `node:crypto` Web Crypto, `node:util` its diff and SIGINT tracing, `node:fs` its
 * `promises` (with readline's interface and the file watchers); together ≈ 0.6 MiB of an idle
 * daemon's RSS (docs/architecture.md, "An idle daemon's memory").
 * `require` returns the same exports object without a facade.
 * Rule: modules that the daemon loads before it accepts take these four built-ins' values from
 * here (types from `import type` as usual), and take nothing from `node:fs/promises` or
 * `node:timers/promises` at load; test/daemon-startup.e2e.ts fails if the lazy modules above
 * load at start. Failures: none.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const crypto = require('node:crypto') as typeof import('node:crypto');
const fs = require('node:fs') as typeof import('node:fs');
const net = require('node:net') as typeof import('node:net');
const util = require('node:util') as typeof import('node:util');

export const { createHash, hash, randomBytes, randomUUID, timingSafeEqual } = crypto;
export const {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} = fs;
export const { createConnection, createServer, isIP } = net;
export const { parseArgs, parseEnv } = util;
