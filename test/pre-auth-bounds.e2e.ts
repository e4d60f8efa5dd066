/**
 * Before `initialize` is accepted a peer is anyone who can reach the TCP port. Against a real
 * daemon process on loopback TCP (default caps: 64 connections, 64 KiB before initialize, 4 MiB
 * for all unaccepted connections together):
 *  - 64 peers each send most of a 4 MiB frame without a token: each is closed with a reason
 *    naming `limits.preAuthBytes`, and the daemon's peak RSS (VmHWM, reset before) grows by
 *    16 MiB at most over its idle RSS after serving 64 clients at once (~+300 MB before the bound);
 *  - attackers that keep 64+ silent connections open, reconnecting as soon as one is closed,
 *    do not keep the owner out: 24 of 24 connects with the token are served.
 * The daemon stays alive and keeps serving throughout.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../protocol/index.js';
import { isAlive, peakRssFrom, pollUntil, rssMiB, runCleanups, sleep, startLoadDaemon, type LoadDaemon } from './support/load-daemon.js';
import { RawPeer } from './support/raw-peer.js';
import { openSocket, processFaults, tcpConfig, TCP_TOKEN, type WireTarget } from './support/wire-peers.js';

const PEERS = 64;
const FRAME = 4 * 1024 * 1024;
const cleanups: Array<() => unknown> = [];
let daemon: LoadDaemon;
let target: WireTarget;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-preauth-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const tcp = await tcpConfig(dir);
  daemon = await startLoadDaemon({ tcp });
  cleanups.push(() => daemon.stop());
  target = { socket: daemon.socket, port: tcp.port };
  // The listener opens after the unix socket: wait until it answers.
  await pollUntil(() => openSocket(target, 'tcp').then((s) => (s.destroy(), true), () => false), (ok) => ok, 10_000, 'the TCP listener');
});

afterAll(async () => {
  await runCleanups(cleanups);
});


async function ownerServed(): Promise<boolean> {
  const peer = RawPeer.fromSocket(await openSocket(target, 'tcp'));
  try {
    const reply = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'owner', version: '0' }, token: TCP_TOKEN }, 10_000);
    if (reply.error) return false;
    return (await peer.request('providers/list', {}, 10_000)).result !== undefined;
  } catch {
    return false;
  } finally {
    peer.close();
  }
}

it(`${PEERS} peers × unfinished ${FRAME / 1024 / 1024} MiB frames without a token: each closed with a reason, peak RSS +16 MiB at most`, { timeout: 120_000 }, async () => {
  // Warm up with as many well-behaved clients at once, so "idle" is a daemon that has served 64
  // connections: the bound is on what the attackers' bytes cost, not on 64 connections existing.
  expect((await Promise.all(Array.from({ length: PEERS }, () => ownerServed()))).every(Boolean)).toBe(true);
  await sleep(500);
  const idle = rssMiB(daemon.pid);
  const peakFrom = peakRssFrom(daemon.pid);

  const body = Buffer.alloc(FRAME - 1, 0x61);
  const peers = await Promise.all(
    Array.from({ length: PEERS }, async () => {
      const socket = await openSocket(target, 'tcp');
      const peer = RawPeer.fromSocket(socket);
      socket.on('error', () => undefined); // the daemon hangs up mid-write: EPIPE / ECONNRESET
      socket.write(`Content-Length: ${FRAME}\r\n\r\n`);
      socket.write(body);
      return peer;
    }),
  );
  await Promise.all(peers.map((p) => Promise.race([p.whenClosed, sleep(30_000)])));
  const peak = peakFrom.stop();
  const closed = peers.filter((p) => p.closed).length;
  const reasons = new Set(peers.map((p) => p.messages.find((m) => m.id === null)?.error?.message?.replace(/\d+ bytes before/, 'N bytes before')));
  for (const p of peers) p.close();

  console.log(`pre-auth: ${PEERS} × ${FRAME / 1024 / 1024} MiB unfinished frames: RSS idle ${idle.toFixed(1)} MiB, peak ${peak.toFixed(1)} MiB (+${(peak - idle).toFixed(1)})`);
  expect(closed).toBe(PEERS);
  expect([...reasons]).toEqual(['closing: sent N bytes before initialize was accepted, over the 65536-byte limit (limits.preAuthBytes)']);
  expect(peak - idle).toBeLessThanOrEqual(16);
  expect(isAlive(daemon.pid)).toBe(true);
  expect(await ownerServed()).toBe(true);
});

it('the owner gets in 24 of 24 times while attackers hold the TCP cap with silent connections and reconnect at once', { timeout: 120_000 }, async () => {
  let attacking = true;
  const open = new Set<Socket>();
  let reconnects = 0;
  // More attackers than the cap (64): some are always waiting to take a freed place.
  const attacker = async (): Promise<void> => {
    while (attacking) {
      let socket: Socket;
      try {
        socket = await openSocket(target, 'tcp');
      } catch {
        await sleep(5);
        continue;
      }
      open.add(socket);
      socket.on('error', () => undefined);
      socket.resume(); // read the farewell, so the daemon's hang-up is seen as a close
      socket.write('Content-Length: 100\r\n\r\n{"jsonrpc"');
      await new Promise<void>((resolve) => socket.once('close', () => resolve()));
      open.delete(socket);
      reconnects += 1;
    }
  };
  const attackers = Array.from({ length: 80 }, () => attacker());
  try {
    // The cap is held and the attackers are displacing each other: the churn the owner must beat.
    await pollUntil(() => ({ open: open.size, reconnects }), (s) => s.open >= 64 && s.reconnects >= 32, 20_000, 'the attackers to hold the cap and churn');
    let served = 0;
    for (let i = 0; i < 24; i++) if (await ownerServed()) served += 1;
    console.log(`pre-auth: owner served ${served} of 24 against 80 reconnecting attackers (${reconnects} attacker reconnects)`);
    expect(served).toBe(24);
  } finally {
    attacking = false;
    for (const socket of open) socket.destroy();
    await Promise.all(attackers);
  }
  expect(isAlive(daemon.pid)).toBe(true);
  expect(processFaults(daemon.stderr())).toEqual([]);
});
