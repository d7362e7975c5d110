// An OTLP/HTTP trace receiver for the tests: decodes each POST /v1/traces body with the official
// OTLP protobuf definitions (as compiled into OpenTelemetry JS's @opentelemetry/otlp-transformer)
// and appends one JSON line per span to OUT_FILE. Prints "receiving on port N" once listening.
// With --count-only it decodes nothing and writes one line per batch, {"bytes": N} (a cheap sink
// for measuring the senders).
//
//   node otlp_receiver.mjs OUT_FILE [--count-only]
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const { ExportTraceServiceRequest, ExportTraceServiceResponse } =
    root.opentelemetry.proto.collector.trace.v1;

const out = process.argv[2];
const countOnly = process.argv[3] === '--count-only';
const hex = (bytes) => Buffer.from(bytes ?? []).toString('hex');

function value(any) {
  if (any.stringValue != null) return any.stringValue;
  if (any.boolValue != null) return any.boolValue;
  if (any.intValue != null) return Number(any.intValue);
  if (any.doubleValue != null) return any.doubleValue;
  return null;
}

function attributes(list) {
  const result = {};
  for (const kv of list ?? []) result[kv.key] = value(kv.value ?? {});
  return result;
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/traces' ||
        req.headers['content-type'] !== 'application/x-protobuf') {
      res.writeHead(400).end();
      return;
    }
    if (countOnly) {
      appendFileSync(out, JSON.stringify({ bytes: Buffer.concat(chunks).length }) + '\n');
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end();
      return;
    }
    let request;
    try {
      request = ExportTraceServiceRequest.decode(Buffer.concat(chunks));
    } catch (e) {
      appendFileSync(out, JSON.stringify({ decode_error: String(e) }) + '\n');
      res.writeHead(400).end();
      return;
    }
    let lines = '';
    for (const rs of request.resourceSpans) {
      const resource = attributes(rs.resource?.attributes);
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          lines += JSON.stringify({
            service: resource['service.name'],
            service_version: resource['service.version'],
            scope: ss.scope?.name,
            trace_id: hex(s.traceId),
            span_id: hex(s.spanId),
            parent_span_id: hex(s.parentSpanId),
            trace_state: s.traceState,
            name: s.name,
            kind: s.kind,
            start_ns: String(s.startTimeUnixNano),
            end_ns: String(s.endTimeUnixNano),
            attributes: attributes(s.attributes),
            events: (s.events ?? []).map((e) => ({ name: e.name, time_ns: String(e.timeUnixNano) })),
            status_code: s.status?.code ?? 0,
            status_message: s.status?.message ?? '',
          }) + '\n';
        }
      }
    }
    appendFileSync(out, lines);
    res.writeHead(200, { 'Content-Type': 'application/x-protobuf' });
    res.end(Buffer.from(ExportTraceServiceResponse.encode({}).finish()));
  });
});
server.listen(0, '127.0.0.1', () => {
  console.log(`receiving on port ${server.address().port}`);
});
