/**
 * Gives `target` the enumerable property `field`, made by `make` the first time it is read and
 * kept: a value only some readers need (a claim's stored job id, which a replay never writes) is
 * made only when one reads it. Spreading `target` reads it, as any reader does.
 */
export function lazyField<T extends object, K extends keyof T>(target: T, field: K, make: () => T[K]): void {
  let made = false;
  let value: T[K];
  Object.defineProperty(target, field, {
    enumerable: true,
    configurable: true,
    get(): T[K] {
      if (!made) {
        value = make();
        made = true;
      }
      return value;
    },
  });
}
