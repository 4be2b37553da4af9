/* A stand-in for Windows' bcryptprimitives.dll, for running rdmabench's Windows build
 * under wine 8 (ci/wine/run). Rust's standard library imports ProcessPrng from it
 * (Windows 10 and later); wine 8 has no such export, so no Rust executable loads.
 * ProcessPrng fills a buffer with random bytes; RtlGenRandom (advapi32's
 * SystemFunction036) is wine's own generator. Built by ci/wine/run with mingw-w64;
 * never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
