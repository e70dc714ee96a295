/** Where a profiled frame belongs: its package, this library's src/ file, a bench file, node internals, or the profiler's own kinds ((idle), (garbage collector), (native)). */
export function bucket(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 14).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const src = url.indexOf('/src/');
  if (src >= 0) return `library ${url.slice(src + 1)}`;
  const bench = url.indexOf('/bench/');
  if (bench >= 0) return `bench ${url.slice(bench + 1)}`;
  return url;
}
