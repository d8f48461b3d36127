import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { leaseStoreConformance } from '../support/leaseStoreConformance.js';

leaseStoreConformance('MemoryLeaseStore', async () => ({ store: new MemoryLeaseStore() }));
