import { hmacSha256Hex, signStandardWebhook } from '../../src/domain/signing.js';

/** Builds signed callbacks exactly as each provider sends them. */
export const communication = {
  headers: (secret: string, body: string) => ({ 'content-type': 'application/json', 'x-signature': hmacSha256Hex(secret, Buffer.from(body)) }),
  messageStatus: (messageId: string, status: string, timestamp = new Date().toISOString()) =>
    JSON.stringify({ event: 'message.status', message_id: messageId, status, timestamp }),
};

export const automation = {
  headers: (secret: string, body: string, t = Math.floor(Date.now() / 1000)) => ({
    'content-type': 'application/json',
    'x-momo-signature': `t=${t},v1=${hmacSha256Hex(secret, Buffer.from(`${t}.${body}`))}`,
  }),
  body: (id: string, event = 'order.created', subscription = 'sub_1', data: unknown = { orderId: 'o1' }) =>
    JSON.stringify({ id, event, subject: { id: `subj_${id}`, type: 'order' }, actor: { id: 'user_1' }, subscription: { id: subscription }, data }),
};

export const standard = {
  headers: (secret: string, id: string, body: string, t = Math.floor(Date.now() / 1000)) => ({
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': signStandardWebhook(secret, id, t, body),
  }),
};
