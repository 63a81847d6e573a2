/* microbench: one thread, one kernel set (SET=name, default the best), the per-16 types' decode (1 token):
 * per-32 activations (the decode before this branch) vs per256, on the same random blocks, 1152 x 6912.
 * Build: gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/include/cjson microbench.c build/libwisp.a \
 *        -lcjson -lcrypto -lm -lpthread -lmvec -o mb */
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
static double run(const wisp_i8_kernels *k, wisp_matrix *m, wisp_i8_act *a, float *y, float *scr, int per, int reps){
  double best=1e9;
  for(int rep=0;rep<reps;rep++){double t0=now();
    for(int r=0;r<m->rows;r+=per){int nr=m->rows-r<per?m->rows-r:per; k->gemm(m,NULL,r,nr,a,0,1,y+r,m->rows,0,scr);}
    double t=now()-t0; if(t<best)best=t;}
  return best;
}
int main(void){
  wisp_wtype types[]={WISP_W_Q6K,WISP_W_Q3K,WISP_W_Q2K};
  const char*names[]={"q6k","q3k","q2k"};
  int R=1152,C=6912;
  const wisp_i8_kernels *k=wisp_i8_kernels_get();
  if(getenv("SET")){const wisp_i8_kernels*sets[4];int can[4];int ns=wisp_i8_kernels_all(sets,can,4);for(int i=0;i<ns;i++)if(!strcmp(sets[i]->name,getenv("SET")))k=sets[i];}
  float *x=malloc(sizeof(float)*C); for(int i=0;i<C;i++) x[i]=(float)(rnd()%2001)/1000.0f-1;
  float *y=malloc(sizeof(float)*R), *scr=malloc(sizeof(float)*WISP_I8_SCRATCH(C));
  for(int ti=0;ti<3;ti++){
    const wisp_quant_traits*tr=wisp_quant_traits_of(types[ti]);
    size_t bytes=(size_t)R*(C/tr->block)*tr->block_bytes; uint8_t*q=malloc(bytes);
    for(size_t i=0;i<bytes;i++)q[i]=rnd();
    size_t nblk=(size_t)R*(C/tr->block);
    for(size_t b=0;b<nblk;b++){ uint16_t d=wisp_f32_to_f16(0.01f); uint8_t*blk=q+b*tr->block_bytes;
      int at= types[ti]==WISP_W_Q6K?208: types[ti]==WISP_W_Q3K?108: 80;
      memcpy(blk+at,&d,2); if(types[ti]==WISP_W_Q2K) memcpy(blk+at+2,&d,2);}
    wisp_matrix m={.type=types[ti],.rows=R,.cols=C,.q=q};
    wisp_i8_act a={0},b={0}; wisp_i8_act_reserve(&a,1,C); wisp_i8_act_reserve(&b,1,C);
    b.per256=1; k->quantize(x,0,1,&a); k->quantize(x,0,1,&b);
    double t32=1e9,t256=1e9;
    for(int rr=0;rr<3;rr++){double u=run(k,&m,&a,y,scr,144,20); if(u<t32)t32=u; u=run(k,&m,&b,y,scr,144,20); if(u<t256)t256=u;}
    printf("%s %s n=1 per32 %.3f ms  per256 %.3f ms  ratio %.2f\n",k->name,names[ti],t32*1e3,t256*1e3,t256/t32);
    wisp_i8_act_free(&a); wisp_i8_act_free(&b); free(q);}
  return 0;}
