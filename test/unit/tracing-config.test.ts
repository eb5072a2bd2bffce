import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/index.js';
import { otlpProtocol, tracingRequested } from '../../src/infra/tracing.js';

describe('tracing is configured by the standard OTEL_* variables', () => {
  it('is off with nothing set, unlike the SDK default of localhost:4318', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_SERVICE_NAME: 'relay', OTEL_TRACES_SAMPLER: 'always_on' })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBe(false);
  });

  it('is on with an OTLP endpoint, general or for traces', () => {
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://tempo:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://tempo:4318/v1/traces' })).toBe(true);
  });

  it('stays off when the SDK is disabled or the traces exporter is none', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://tempo:4318' };
    expect(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' })).toBe(false);
    expect(tracingRequested({ ...endpoint, OTEL_TRACES_EXPORTER: 'console, none' })).toBe(false);
    expect(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'false' })).toBe(true);
  });

  it('exports protobuf unless JSON is asked for, the traces setting first, and names a bad value', () => {
    expect(otlpProtocol({})).toBe('http/protobuf');
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe('http/json');
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })).toBe('http/protobuf');
    expect(() => otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(ConfigError);
    expect(() => otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL.*grpc/);
  });
});
