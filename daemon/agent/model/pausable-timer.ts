/** A one-shot timer that can stop counting for a while (a step waiting for its endpoint's permit). */
export class PausableTimer {
  private timer: NodeJS.Timeout | undefined;
  private remaining: number;
  private startedAt = 0;

  constructor(
    private readonly fire: () => void,
    ms: number,
  ) {
    this.remaining = ms;
    this.resume();
  }

  pause(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.remaining = Math.max(0, this.remaining - (Date.now() - this.startedAt));
  }

  resume(): void {
    if (this.timer !== undefined || this.remaining < 0) return;
    this.startedAt = Date.now();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.remaining = -1;
      this.fire();
    }, this.remaining);
  }

  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.remaining = -1;
  }
}
