/**
 * TCP keepalive probes start after a connection to PostgreSQL or Redis has been idle this long.
 * Without it the kernel waits 2 h, and a NAT or firewall that forgets idle flows after a few minutes
 * cuts an idle connection silently (a whole database pool held between bursts, a request
 * connection at night): its next command waits for a timeout before failing. The probes keep such
 * a flow alive, and let the kernel find a peer that is gone.
 */
export const keepAliveIdleMs = 30_000;
