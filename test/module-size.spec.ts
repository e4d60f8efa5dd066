/**
 * The client's service class stays small enough to read: its work lives in the modules beside it
 * (run handles, start fields, rollback, retry, reconnect), and a new concern gets a module of its
 * own instead of growing this one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '..');

describe('module size', () => {
  it('client/remote-service.ts is under 450 lines', () => {
    const lines = readFileSync(join(REPO, 'client', 'remote-service.ts'), 'utf8').split('\n').length;
    expect(lines).toBeLessThan(450);
  });
});
