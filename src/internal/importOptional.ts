import { RxfeedError } from '../errors/RxfeedError.js';

/** Imports an optional peer dependency, or explains how to install it. */
export async function importOptional<M>(packageName: string, load: () => Promise<M>, feature: string): Promise<M> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new RxfeedError(`${feature} needs the optional package ${packageName}: run \`npm install ${packageName}\``, {
        cause: error,
      });
    }
    throw error;
  }
}
