/* The activation quantizer alone (per 32, the prefill's): 512 tokens x 6912, best of 20, best kernel set.
 * Build against main's and the branch's build/libwisp.a as microbench.c. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend/cpu/cpu_i8.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){ const int n=512,K=6912; const wisp_i8_kernels *k=wisp_i8_kernels_get();
  float *x=malloc(sizeof(float)*n*K); unsigned s=1; for(int i=0;i<n*K;i++){s=s*1664525u+1013904223u; x[i]=(float)((s>>8)%2001)/1000.0f-1;}
  wisp_i8_act a={0}; wisp_i8_act_reserve(&a,n,K); double best=1e9;
  for(int r=0;r<20;r++){double t=now(); k->quantize(x,0,n,&a); t=now()-t; if(t<best)best=t;}
  printf("%s quantize 512 x 6912: %.3f ms\n",k->name,best*1e3); return 0;}
