// The parts of autocannon 9 the benchmark uses (the package ships no types).
declare module 'autocannon' {
  interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    setupRequest?: (req: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest | null;
  }
  interface AutocannonOptions {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    overallRate?: number;
    pipelining?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    requests?: AutocannonRequest[];
  }
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    [key: string]: number;
  }
  interface AutocannonResult {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Histogram;
    requests: Histogram & { sent: number };
  }
  function autocannon(opts: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
