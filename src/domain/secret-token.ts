import { randomBytes } from 'node:crypto';
import { digestHex } from './dedupe.js';

/**
 * Bearer secrets the platform issues (API keys `sk_`, portal links `psl_`, portal sessions `pst_`):
 * the prefix says what a token is, 32 random bytes make it unguessable.
 */
export const newSecretToken = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;

/**
 * Only a SHA-256 of each token is stored and looked up. Tokens are 256 random bits, so a fast hash
 * is enough: there is nothing to brute-force that a slow one would protect.
 */
export const hashSecretToken = (token: string): string => digestHex(token);
