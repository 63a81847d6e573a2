/* decode microbench (branch q40): one token, big matrix streamed from DRAM, 1 or 2 threads (pthreads, rows split in halves,
 * each half in tasks of `per` rows like the backend). Q4 (as Q4_0's copy: nibbles + f16 scales), Q8_0, Q5_0;
 * ONLY=q6k / q4k with COLS=1536 for those. Usage: mb THREADS [ROWS=262144] [REPS=5]; best of REPS.
 * Build (A: cpu_i8_x86.c of main compiled apart and linked first):
 *   gcc -O2 -std=c11 -Iinclude -Isrc -I/usr/include/cjson mb.c [x86_A.o] build/libwisp.a -lcjson -lcrypto -lm -lpthread -lmvec */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/cpu/cpu_i8.h"
#include "format/qblocks.h"
#include "format/quant.h"
#include "format/tensor.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static unsigned st=1; static unsigned rnd(void){st=st*1664525u+1013904223u;return st>>8;}
typedef struct {const wisp_i8_kernels*k; wisp_matrix*m; const uint16_t*s16; wisp_i8_act*a; float*y; int r0,r1,per; float*scr;} arg;
static void *work(void*p){arg*g=p; for(int r=g->r0;r<g->r1;r+=g->per){int nr=g->r1-r<g->per?g->r1-r:g->per; g->k->gemm(g->m,g->s16,r,nr,g->a,0,1,g->y+r,g->m->rows,0,g->scr);} return NULL;}
int main(int argc,char**argv){
  int T=argc>1?atoi(argv[1]):1; int R=argc>2?atoi(argv[2]):262144; int C=getenv("COLS")?atoi(getenv("COLS")):1152; int reps=argc>3?atoi(argv[3]):5;
  const wisp_i8_kernels *k=wisp_i8_kernels_get();
  if(getenv("SET")){const wisp_i8_kernels*sets[4];int can[4];int ns=wisp_i8_kernels_all(sets,can,4);for(int i=0;i<ns;i++)if(!strcmp(sets[i]->name,getenv("SET")))k=sets[i];}
  float *x=malloc(sizeof(float)*C); for(int i=0;i<C;i++) x[i]=(float)(rnd()%2001)/1000.0f-1;
  float *y=malloc(sizeof(float)*R);
  wisp_wtype types[]={WISP_W_Q4,WISP_W_Q8_0,WISP_W_Q5_0,WISP_W_Q6K,WISP_W_Q4K}; const char*names[]={"q4(q4_0 copy)","q8_0","q5_0","q6k","q4k"};
  const char*only=getenv("ONLY");
  for(int ti=0;ti<5;ti++){
    if(only?!strstr(names[ti],only):ti>2)continue; /* the 256-blocks only when asked for (COLS a multiple of 256) */
    size_t nblk=(size_t)R*(C/32); size_t bytes= ti==0? nblk*16 : ti==3? nblk/8*WISP_Q6K_BYTES : ti==4? nblk/8*WISP_Q4K_BYTES : nblk*(ti==1?WISP_Q8_0_BYTES:WISP_Q5_0_BYTES);
    uint8_t*q=malloc(bytes); for(size_t i=0;i<bytes;i++)q[i]=rnd();
    uint16_t*s16=NULL; size_t bb= ti==1?WISP_Q8_0_BYTES:WISP_Q5_0_BYTES;
    if(ti==0){s16=malloc(nblk*2); for(size_t b=0;b<nblk;b++)s16[b]=wisp_f32_to_f16(0.01f);}
    else if(ti==3) for(size_t b=0;b<nblk/8;b++){uint16_t d=wisp_f32_to_f16(0.01f); memcpy(q+b*WISP_Q6K_BYTES+208,&d,2);}
    else if(ti==4) for(size_t b=0;b<nblk/8;b++){uint16_t d=wisp_f32_to_f16(0.01f); memcpy(q+b*WISP_Q4K_BYTES,&d,2); memcpy(q+b*WISP_Q4K_BYTES+2,&d,2);}
    else for(size_t b=0;b<nblk;b++){uint16_t d=wisp_f32_to_f16(0.01f); memcpy(q+b*bb,&d,2);}
    wisp_matrix m={.type=types[ti],.rows=R,.cols=C,.q=q};
    wisp_i8_act a={0}; wisp_i8_act_reserve(&a,1,C); a.layout=wisp_i8_layout_for(m.type,1); a.per256=wisp_i8_per256_for(m.type,1); k->quantize(x,0,1,&a);
    size_t tot=bytes+(s16?nblk*2:0);
    double best=1e9;
    for(int rep=0;rep<reps;rep++){
      pthread_t th[8]; arg g[8]; int per=(R/(T*4)+3)/4*4;
      double t0=now();
      for(int i=0;i<T;i++){g[i]=(arg){k,&m,s16,&a,y,(int)((long)R*i/T/4*4),(int)(i==T-1?R:(long)R*(i+1)/T/4*4),per,malloc(sizeof(float)*WISP_I8_SCRATCH(C))};
        if(i) pthread_create(&th[i],NULL,work,&g[i]);}
      work(&g[0]); for(int i=1;i<T;i++)pthread_join(th[i],NULL);
      double t=now()-t0; if(t<best)best=t;
      for(int i=0;i<T;i++)free(g[i].scr);
    }
    printf("%s %s T=%d rows=%d %.3f ms  %.1f GB/s  (%.1f MB)\n",k->name,names[ti],T,R,best*1e3,tot/best/1e9,tot/1e6);
    free(q); free(s16); wisp_i8_act_free(&a);
  }
  return 0;}
