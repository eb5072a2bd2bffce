/** A replay is `running` while any delivery it restarted is unfinished, then `completed`. */
export const REPLAY_STATUSES = ['running', 'completed'] as const;
export type ReplayStatus = (typeof REPLAY_STATUSES)[number];
