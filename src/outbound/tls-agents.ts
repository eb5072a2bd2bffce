import type { Dispatcher } from 'undici';
import type { EndpointTls } from '../domain/endpoint-tls.js';
import { RecentMap } from '../domain/recent.js';

/** An endpoint's TLS settings for one attempt; `version` changes whenever the settings do. */
export interface AttemptTls {
  endpointId: string;
  version: string;
  config: EndpointTls;
}

interface Held {
  version: string;
  agent: Dispatcher;
}

/**
 * One connection pool per endpoint with mutual TLS, so that no other endpoint ever shares its
 * sockets, its client certificate or its trusted CAs. A new version (the tenant PATCHed new
 * settings) gets a new pool and closes the old one once its requests are done.
 */
export class EndpointTlsAgents {
  private readonly held: RecentMap<Held>;
  private readonly all = new Set<Dispatcher>();

  constructor(
    private readonly create: (config: EndpointTls) => Dispatcher,
    capacity = 1_000,
  ) {
    this.held = new RecentMap(capacity);
  }

  agentFor(tls: AttemptTls): Dispatcher {
    const known = this.held.get(tls.endpointId);
    if (known && known.version === tls.version) return known.agent;
    if (known) this.retire(known.agent);
    const agent = this.create(tls.config);
    this.all.add(agent);
    this.held.set(tls.endpointId, { version: tls.version, agent });
    return agent;
  }

  /** An agent forgotten by the bounded map only holds idle sockets, which its keep-alive timeout closes. */
  private retire(agent: Dispatcher): void {
    this.all.delete(agent);
    void agent.close().catch(() => {});
  }

  async close(): Promise<void> {
    await Promise.all([...this.all].map((a) => a.close()));
    this.all.clear();
  }
}
