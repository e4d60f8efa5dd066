/** The lent-slot rule on its own (daemon/service/lineage-slots.ts): one child at a time per parent, in order, abortable. */
import { expect, it } from 'vitest';
import { LineageSlots } from '../daemon/service/lineage-slots.js';

it('a parent lends its slot to one child at a time, in order; parents do not share', async () => {
  const slots = new LineageSlots();
  const first = await slots.borrow('parent-a', new AbortController().signal);
  const other = await slots.borrow('parent-b', new AbortController().signal); // another parent's slot: at once
  const order: string[] = [];
  const second = slots.borrow('parent-a', new AbortController().signal).then((lease) => (order.push('second'), lease));
  const third = slots.borrow('parent-a', new AbortController().signal).then((lease) => (order.push('third'), lease));
  await Promise.resolve();
  expect(order).toEqual([]);
  expect(slots.stats()).toEqual({ descendants: 2, waiting: 2 });
  first.release();
  first.release(); // once only
  const lease2 = await second;
  expect(order).toEqual(['second']);
  expect(slots.stats()).toEqual({ descendants: 2, waiting: 1 });
  lease2.release();
  (await third).release();
  other.release();
  expect(order).toEqual(['second', 'third']);
  expect(slots.stats()).toEqual({ descendants: 0, waiting: 0 });
});

it('a waiting nested start that is cancelled leaves the line at once, ABORTED', async () => {
  const slots = new LineageSlots();
  const held = await slots.borrow('p', new AbortController().signal);
  const abort = new AbortController();
  const waiting = slots.borrow('p', abort.signal);
  abort.abort();
  await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
  expect(slots.stats()).toEqual({ descendants: 1, waiting: 0 });
  held.release();
  expect(slots.stats()).toEqual({ descendants: 0, waiting: 0 });
  await expect(slots.borrow('p', abort.signal)).rejects.toMatchObject({ code: 'ABORTED' });
});
