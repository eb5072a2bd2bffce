// `node --import tsx --import ./test/helpers/module-log.mjs ...`: writes the URL of every module the
// process resolves through the ESM loader to the file named by MODULE_LOG, one per line. Registered
// after tsx, so its resolve hook runs first and records the URL tsx and node settle on.
import { register } from 'node:module';

if (!process.env.MODULE_LOG) throw new Error('module-log.mjs: set MODULE_LOG to the file to write');
register('./module-log-hooks.mjs', import.meta.url, { data: { file: process.env.MODULE_LOG } });
