/** A run's states on the wire, declared once: the schema (schemas.ts) and the CLI's `runs --state` read this list. */
export const RUN_STATES = ['starting', 'running', 'settled', 'disposed'] as const;
