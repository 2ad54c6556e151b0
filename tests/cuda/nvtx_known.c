/* nvtx_known.c: a known-answer program for memscope's NVTX injection (src/agent/nvtx.c), built
 * with NVIDIA's own header-only NVTX (nvtx3/nvToolsExt.h from a CUDA toolkit) where it is
 * installed: what a program using NVTX does, with NVTX's own loader finding the injection named
 * by NVTX_INJECTION64_PATH. test_cuda.sh checks the ranges and marks memscope records. */
#include <nvtx3/nvToolsExt.h>

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
    nvtxDomainDestroy(dom);
    free(a);
    free(b);
    printf("ok\n");
    return 0;
}
