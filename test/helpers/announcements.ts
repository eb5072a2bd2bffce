import type { Platform } from '../../src/platform.js';
import { eventually } from './platform.js';

export interface AnnouncementWatch {
  /** Resolves once the operational-event step has finished for every one of these dead deliveries. */
  announced(deliveryIds: string[], timeoutMs?: number): Promise<void>;
  /** Resolves once a whole sweep (dead-lettering and its announcements) has run after this call. */
  fullSweep(timeoutMs?: number): Promise<void>;
}

/**
 * Watches an in-process platform's delivery lifecycle without changing what it does: it records
 * which dead deliveries have been through `announce` (the step that publishes operational events)
 * and how many sweeps have started. "No operational event was published" cannot be observed
 * directly, so a test waits for the step that would have published it to have finished instead of
 * sleeping and hoping it had.
 */
export function watchAnnouncements(platform: Platform): AnnouncementWatch {
  const lifecycle = platform.lifecycle;
  const announce = lifecycle.announce.bind(lifecycle);
  const sweep = lifecycle.sweep.bind(lifecycle);
  const done = new Set<string>();
  let sweepsStarted = 0;
  lifecycle.announce = async (deadIds, ...rest) => {
    try {
      await announce(deadIds, ...rest);
    } finally {
      for (const id of deadIds) done.add(id);
    }
  };
  lifecycle.sweep = () => {
    sweepsStarted++;
    return sweep();
  };
  return {
    announced: async (deliveryIds, timeoutMs) => {
      await eventually(async () => deliveryIds.every((id) => done.has(id)), `operational events of ${deliveryIds.length} dead deliveries handled`, timeoutMs);
    },
    // Sweeps never overlap: once the second sweep after this call has started, the first one,
    // which started after this call, has finished with its announcements.
    fullSweep: async (timeoutMs) => {
      const target = sweepsStarted + 2;
      await eventually(async () => sweepsStarted >= target, 'a full sweep', timeoutMs);
    },
  };
}
