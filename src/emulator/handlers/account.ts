import { header, type Reply } from '../http.js';
import type { RoutedRequest } from './context.js';

/** `GET /`: the database account. Every later request goes to its first location, so that is this server as reached. */
export function readAccount(req: RoutedRequest): Reply {
  const endpoint = `http://${header(req.headers, 'host') ?? '127.0.0.1'}/`;
  const location = [{ name: 'Emulator', databaseAccountEndpoint: endpoint }];
  return {
    status: 200,
    body: {
      id: 'rxfeed-emulator',
      _rid: 'rxfeed-emulator',
      _self: '',
      _dbs: '//dbs/',
      media: '//media/',
      addresses: '//addresses/',
      writableLocations: location,
      readableLocations: location,
      enableMultipleWriteLocations: false,
      userReplicationPolicy: { asyncReplication: false, minReplicaSetSize: 1, maxReplicasetSize: 4 },
      userConsistencyPolicy: { defaultConsistencyLevel: 'Session' },
      systemReplicationPolicy: { minReplicaSetSize: 1, maxReplicasetSize: 4 },
      readPolicy: { primaryReadCoefficient: 1, secondaryReadCoefficient: 1 },
    },
  };
}
