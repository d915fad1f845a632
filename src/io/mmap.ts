/**
 * Private (copy-on-write) file mappings: the bytes of a file as a Uint8Array whose pages are read
 * from disk when first touched, and whose writes go to private copies of the pages, never to the
 * file (mmap(2) MAP_PRIVATE). A model whose parameters view such a mapping can be trained in
 * place without changing its checkpoint.
 *
 * `Bun.mmap(path, { shared: false })` maps with MAP_PRIVATE and PROT_READ|PROT_WRITE, but opens
 * the file O_RDWR, so it fails (EACCES) on a file the process may read but not write: a
 * read-only Hugging Face cache, a read-only mount, another user's files. Private writable
 * mappings need only read access, so for those the file is mapped here through libc's mmap (an
 * O_RDONLY descriptor, PROT_READ|PROT_WRITE, MAP_PRIVATE) with bun:ffi, and the ArrayBuffer's
 * finalizer unmaps it: Bun calls the deallocator as (bytes, context) with context = the length,
 * which is munmap(addr, length).
 * Source: mmap(2) (MAP_PRIVATE: "updates to the mapping are not carried through to the
 * underlying file"; EACCES only for MAP_SHARED with PROT_WRITE on a descriptor not open for
 * writing); JavaScriptCore JSTypedArrayBytesDeallocator.
 */
import { FFIType, dlopen, toArrayBuffer } from "bun:ffi";

const PROT_READ_WRITE = 3; // PROT_READ | PROT_WRITE, the same on Linux and macOS
const MAP_PRIVATE = 2; // Linux and macOS
const MAP_FAILED = 0xffffffffffffffffn; // (void *) -1

interface Libc {
  mmap(addr: null, length: number, prot: number, flags: number, fd: number, offset: number): bigint;
  munmap_ptr: number;
}

let libc: Libc | null | undefined;

// libc's mmap and munmap through bun:ffi, or null where that is unavailable (another OS, no FFI).
function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  const name = process.platform === "linux" ? "libc.so.6" : process.platform === "darwin" ? "libSystem.B.dylib" : null;
  if (name === null) return libc;
  try {
    const lib = dlopen(name, {
      mmap: { args: [FFIType.ptr, FFIType.u64, FFIType.i32, FFIType.i32, FFIType.i32, FFIType.i64], returns: FFIType.u64 },
      munmap: { args: [FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
    });
    const munmap_ptr = (lib.symbols.munmap as unknown as { ptr: number }).ptr;
    if (typeof munmap_ptr !== "number") return libc;
    libc = { mmap: (...a) => BigInt(lib.symbols.mmap(...a) as bigint | number), munmap_ptr };
  } catch {
    libc = null;
  }
  return libc;
}

/**
 * Maps the whole of regular file `path` privately, or returns null when it cannot be mapped (no
 * mmap support, a filesystem that refuses it); the caller then reads it. Writes to the returned
 * bytes never reach the file. The mapping lives as long as any view of its buffer.
 * @param fd - `path` opened for reading and checked to be a regular file (the fallback maps this
 *   descriptor, so a file swapped in after the check is never mapped)
 * @param size - its size in bytes (fstat of fd); a mapping of another length is discarded
 */
export function map_private(path: string, fd: number, size: number): Uint8Array | null {
  if (size <= 0) return null;
  try {
    const m = Bun.mmap(path, { shared: false });
    if (m.length === size) return m;
  } catch {
    // EACCES on a file this process may not write (Bun opens it O_RDWR): mapped from fd below
  }
  return map_fd_private(fd, size);
}

/**
 * Maps `size` bytes of open descriptor `fd` (read access suffices) privately through libc's mmap;
 * null where libc cannot be reached through bun:ffi or mmap fails. The ArrayBuffer's finalizer
 * unmaps it.
 */
export function map_fd_private(fd: number, size: number): Uint8Array | null {
  const c = size > 0 ? loadLibc() : null;
  if (c === null) return null;
  const addr = c.mmap(null, size, PROT_READ_WRITE, MAP_PRIVATE, fd, 0);
  if (addr === MAP_FAILED || addr === 0n) return null;
  // toArrayBuffer(ptr, offset, length, deallocatorContext, deallocator): Bun's 5-argument form
  const make = toArrayBuffer as unknown as (p: number, o: number, n: number, ctx: number, free: number) => ArrayBuffer;
  return new Uint8Array(make(Number(addr), 0, size, size, c.munmap_ptr));
}
