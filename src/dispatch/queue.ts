import { Queue, type ConnectionOptions } from 'bullmq';

export const deliveryQueueName = 'deliveries';

export interface DeliveryJob {
  deliveryId: string;
}

/**
 * One job per (delivery, attempt): admitting the same attempt twice (after a lost lease, say) finds
 * the job already there and adds nothing, and a later attempt gets a fresh id.
 */
export const deliveryJobId = (deliveryId: string, attemptNumber: number) => `${deliveryId}.${attemptNumber}`;

export function createDeliveryQueue(connection: ConnectionOptions, prefix?: string): Queue<DeliveryJob> {
  return new Queue<DeliveryJob>(deliveryQueueName, {
    connection,
    prefix,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: true, attempts: 1 },
  });
}
