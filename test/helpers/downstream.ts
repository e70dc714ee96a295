// The stub lives in src/testing (the demo and users' tests use it too).
export * from '../../src/testing/downstream-stub.js';
