/* nvtx_known.c: a known-answer program for memscope's NVTX injection (src/agent/nvtx.c), built
 * with NVIDIA's own header-only NVTX (nvtx3/nvToolsExt.h from a CUDA toolkit) where it is
 * installed: what a program using NVTX does, with NVTX's own loader finding the injection named
 * by NVTX_INJECTION64_PATH. test_cuda.sh checks the ranges, marks and the memory extension's
 * heap and regions (a pool) memscope records. */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    nvtxRangePushA("outer");
    void *a = malloc(100);
    nvtxMarkA("hello");
    nvtxDomainHandle_t dom = nvtxDomainCreateA("mydomain");
    nvtxEventAttributes_t at = {0};
    at.version = NVTX_VERSION;
    at.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    at.messageType = NVTX_MESSAGE_TYPE_ASCII;
    at.message.ascii = "inner";
    nvtxDomainRangePushEx(dom, &at);
    void *b = malloc(200);
    nvtxDomainRangePop(dom);
    at.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    at.message.registered = nvtxDomainRegisterStringA(dom, "registered");
    nvtxDomainMarkEx(dom, &at);
    nvtxRangePushW(L"wide");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangeId_t id = nvtxRangeStartA("async");
    nvtxRangeEnd(id);

    /* the memory extension: a 1 MiB heap of domain mydomain, three 64 KiB regions, one freed */
    char *arena = malloc(1 << 20);
    nvtxMemVirtualRangeDesc_t whole = {1 << 20, arena};
    nvtxMemHeapDesc_t hd = {0};
    hd.extCompatID = NVTX_EXT_COMPATID_MEM;
    hd.structSize = sizeof hd;
    hd.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    hd.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    hd.typeSpecificDescSize = sizeof whole;
    hd.typeSpecificDesc = &whole;
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(dom, &hd);
    nvtxMemVirtualRangeDesc_t regs[3] = {{65536, arena}, {65536, arena + 65536},
                                         {65536, arena + 131072}};
    nvtxMemRegionsRegisterBatch_t rb = {0};
    rb.extCompatID = NVTX_EXT_COMPATID_MEM;
    rb.structSize = sizeof rb;
    rb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    rb.heap = heap;
    rb.regionCount = 3;
    rb.regionDescElementSize = sizeof regs[0];
    rb.regionDescElements = regs;
    nvtxMemRegionsRegister(dom, &rb);
    nvtxMemRegionRef_t ref;
    ref.pointer = arena + 65536;
    nvtxMemRegionsUnregisterBatch_t ub = {0};
    ub.extCompatID = NVTX_EXT_COMPATID_MEM;
    ub.structSize = sizeof ub;
    ub.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    ub.refCount = 1;
    ub.refElementSize = sizeof ref;
    ub.refElements = &ref;
    nvtxMemRegionsUnregister(dom, &ub);
    nvtxDomainDestroy(dom);
    free(arena);
    free(a);
    free(b);
    printf("ok\n");
    return 0;
}
