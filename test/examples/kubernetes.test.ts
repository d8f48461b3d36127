/** The Kubernetes example: manifests that parse, probes wired to paths the health handler serves, a grace period that fits the stop. */
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { healthHandler, type ProcessorHealth } from '../../src/index.js';

const dir = new URL('../../examples/kubernetes/', import.meta.url);
const manifests = (file: string) =>
  parseAllDocuments(readFileSync(new URL(file, dir), 'utf8')).map((doc) => {
    expect(doc.errors).toEqual([]);
    return doc.toJS() as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  });
const processorSource = readFileSync(new URL('processor.ts', dir), 'utf8');

describe('examples/kubernetes', () => {
  const [deployment] = manifests('deployment.yaml');
  const container = deployment!['spec']['template']['spec']['containers'][0];

  it('is a Deployment whose probes hit the health handler on the port the processor listens on', async () => {
    expect(deployment!['kind']).toBe('Deployment');
    const port = container['ports'].find((p: { name: string }) => p.name === container['livenessProbe']['httpGet']['port']);
    expect(port.containerPort).toBe(Number(/PORT'\] \?\? (\d+)/.exec(processorSource)?.[1]));
    // Both probe paths answer (with the handler's defaults, as processor.ts uses it).
    const health: ProcessorHealth = { status: 'running', live: true, ready: true, owner: 'p', leases: [], lastError: undefined };
    const server = createServer(healthHandler({ health: () => health })).listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      for (const probe of ['livenessProbe', 'readinessProbe']) {
        const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${container[probe]['httpGet']['path']}`);
        expect(res.status, probe).toBe(200);
      }
    } finally {
      server.close();
    }
  });

  it('gives the pod a grace period longer than the processor\'s stop bound, and each pod its own instance name', () => {
    const grace = deployment!['spec']['template']['spec']['terminationGracePeriodSeconds'] * 1000;
    const stopMs = Number(/STOP_TIMEOUT_MS = ([\d_]+)/.exec(processorSource)?.[1]?.replace(/_/g, ''));
    expect(stopMs).toBeGreaterThan(0);
    expect(grace).toBeGreaterThan(stopMs);
    const podName = container['env'].find((e: { name: string }) => e.name === 'POD_NAME');
    expect(podName.valueFrom.fieldRef.fieldPath).toBe('metadata.name');
  });

  it('scales with KEDA\'s azure-cosmosdb trigger on the leases the processor writes', () => {
    const [auth, scaled] = manifests('keda-scaledobject.yaml');
    expect(auth!['kind']).toBe('TriggerAuthentication');
    expect(scaled!['kind']).toBe('ScaledObject');
    expect(scaled!['spec']['scaleTargetRef']['name']).toBe(deployment!['metadata']['name']);
    const trigger = scaled!['spec']['triggers'][0];
    expect(trigger.type).toBe('azure-cosmosdb');
    expect(trigger.authenticationRef.name).toBe(auth!['metadata']['name']);
    const env = Object.fromEntries(container['env'].filter((e: { value?: string }) => e.value).map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(trigger.metadata).toMatchObject({
      processorName: env['PROCESSOR_NAME'],
      databaseId: env['COSMOS_DATABASE'],
      containerId: env['COSMOS_CONTAINER'],
      leaseContainerId: env['COSMOS_LEASE_CONTAINER'],
    });
    // KEDA reads .NET-layout leases only.
    expect(processorSource).toMatch(/leaseScheme: 'dotnet'/);
    expect(Number(trigger.metadata.changeFeedLagThreshold)).toBeGreaterThan(0);
  });
});
