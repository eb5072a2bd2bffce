/** A replay is `running` while any delivery it restarted is unfinished, then `completed`. */
export const REPLAY_STATUSES = ['running', 'completed'] as const;
export type ReplayStatus = (typeof REPLAY_STATUSES)[number];

/** What a row of `replays` is: a bulk replay of existing deliveries, or a backfill that created them. */
export const REPLAY_KINDS = ['replay', 'backfill'] as const;
export type ReplayKind = (typeof REPLAY_KINDS)[number];
