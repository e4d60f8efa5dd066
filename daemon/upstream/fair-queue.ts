/**
 * The order in which requests waiting for one endpoint are let through: round robin across
 * clients first, then across the lineages of the served client, first come first served within a
 * lineage. One busy client (or one lineage with many children) cannot starve another: each turn
 * of the ring serves every waiting client once.
 *
 * Rotation is a Map's insertion order: the served client (and lineage) is moved to the back.
 */
export class FairQueue<T> {
  private readonly clients = new Map<string, Map<string, T[]>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  push(client: string, lineage: string, item: T): void {
    let lineages = this.clients.get(client);
    if (lineages === undefined) this.clients.set(client, (lineages = new Map()));
    let items = lineages.get(lineage);
    if (items === undefined) lineages.set(lineage, (items = []));
    items.push(item);
    this.count += 1;
  }

  /** The next item in fair order, or undefined when nothing waits. */
  shift(): T | undefined {
    for (const [client, lineages] of this.clients) {
      for (const [lineage, items] of lineages) {
        const item = items.shift();
        lineages.delete(lineage);
        if (items.length > 0) lineages.set(lineage, items);
        this.clients.delete(client);
        if (lineages.size > 0) this.clients.set(client, lineages);
        if (item !== undefined) {
          this.count -= 1;
          return item;
        }
      }
      this.clients.delete(client);
    }
    return undefined;
  }

  /** Removes a waiting item (a cancelled wait); false when it was not queued. */
  remove(client: string, lineage: string, item: T): boolean {
    const lineages = this.clients.get(client);
    const items = lineages?.get(lineage);
    const at = items?.indexOf(item) ?? -1;
    if (at < 0) return false;
    items!.splice(at, 1);
    if (items!.length === 0) lineages!.delete(lineage);
    if (lineages!.size === 0) this.clients.delete(client);
    this.count -= 1;
    return true;
  }
}
