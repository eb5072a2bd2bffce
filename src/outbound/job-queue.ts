import { Queue, type ConnectionOptions } from 'bullmq';

/**
 * The BullMQ job queue that carries admitted (`queued`) deliveries to any worker process. Its name
 * is part of every Redis key (`<prefix>:deliveries:*`), so it stays as deployed queues know it.
 */
export const jobQueueName = 'deliveries';

export interface DeliveryJob {
  deliveryId: string;
  /**
   * The delivery's event, so that the claim reads one partition of `events` (claimDelivery).
   * Missing from jobs queued by releases up to 0.6.0; the claim then looks it up.
   */
  eventId?: string;
}

/**
 * One job per (delivery, attempt): admitting the same attempt twice (after a lost lease, say) finds
 * the job already there and adds nothing, and a later attempt gets a fresh id. The id is unique
 * only within one queue, which is why a delivery's shard depends on nothing but its id.
 */
export const deliveryJobId = (deliveryId: string, attemptNumber: number) => `${deliveryId}.${attemptNumber}`;

export function createJobQueue(connection: ConnectionOptions, prefix: string): Queue<DeliveryJob> {
  return new Queue<DeliveryJob>(jobQueueName, {
    connection,
    prefix,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: true, attempts: 1 },
  });
}

// ---------------------------------------------------------------------------------------------
// Shards
//
// BullMQ's scripts touch several keys of a queue at once, so on a Redis Cluster all of a queue's
// keys must share one hash slot: its prefix carries a hash tag (`{…}`), as BullMQ's cluster guide
// says. One tagged queue would put all delivery traffic on one slot of one master (Svix keeps its
// whole queue in one `{queue}` slot that way). So the job queue is split into QUEUE_SHARDS
// queues, each with a tag of its own, and every delivery goes to the shard its id hashes to.

const slotCount = 16_384;

/** CRC16-XMODEM of a string's UTF-8 bytes: the hash Redis Cluster takes a key's slot from. */
function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The slot of a hash tag: what Redis Cluster computes for every key containing `{tag}`. */
export const hashTagSlot = (tag: string): number => crc16(tag) % slotCount;

/**
 * Key prefix of each shard's queue. A single Redis with one shard keeps the layout it always had
 * (`<prefix>:deliveries:*`). Otherwise shard i's keys are `{<tag i>}:deliveries:*`, where tag i is
 * the first of `<prefix>:i`, `<prefix>:i.1`, `<prefix>:i.2`… whose slot lies in the i-th of
 * `shards` equal slices of the slot space. Clusters give each master one contiguous, roughly equal
 * range of slots (redis-cli --cluster create, and managed services, slice them so), so the shards
 * spread over the masters as evenly as their number allows instead of where chance puts them.
 */
export function shardPrefixes(prefix: string, shards: number, cluster: boolean): string[] {
  if (shards === 1 && !cluster) return [prefix];
  return Array.from({ length: shards }, (_, i) => {
    const [from, to] = [Math.floor((i * slotCount) / shards), Math.floor(((i + 1) * slotCount) / shards)];
    // Each candidate lands in the slice with probability 1/shards: `shards` tries on average.
    for (let k = 0; ; k++) {
      const tag = k === 0 ? `${prefix}:${i}` : `${prefix}:${i}.${k}`;
      const slot = hashTagSlot(tag);
      if (slot >= from && slot < to) return `{${tag}}`;
    }
  });
}

/**
 * The shard of a delivery: FNV-1a of its id. By delivery rather than by endpoint, so that one busy
 * endpoint's queued work spreads over every shard (and master) instead of filling one shard's
 * share of each worker's concurrency, and every attempt of a delivery meets its earlier job ids
 * in the same queue. Nothing needs an endpoint's jobs together: admission in PostgreSQL already
 * decides what of an endpoint may run, and in what order.
 */
export function shardOf(deliveryId: string, shards: number): number {
  if (shards === 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < deliveryId.length; i++) hash = Math.imul(hash ^ deliveryId.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % shards;
}
