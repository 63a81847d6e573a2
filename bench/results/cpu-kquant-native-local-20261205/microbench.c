/* microbench: one thread, best kernel set: TYPE own bytes vs its Q8_0 copy */
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
static double run(const wisp_i8_kernels *k, wisp_matrix *m, wisp_i8_act *a, int n, float *y, float *scr, int per, int reps){
  double best=1e9;
  for(int rep=0;rep<reps;rep++){double t0=now();
    for(int r=0;r<m->rows;r+=per){int nr=m->rows-r<per?m->rows-r:per; k->gemm(m,NULL,r,nr,a,0,n,y+r,m->rows,0,scr);}
    double t=now()-t0; if(t<best)best=t;}
  return best;
}
int main(int argc,char**argv){
  wisp_wtype types[]={WISP_W_Q6K,WISP_W_Q3K,WISP_W_Q2K,WISP_W_Q5K,WISP_W_Q4_1,WISP_W_Q5_1,WISP_W_Q4K};
  const char*names[]={"q6k","q3k","q2k","q5k","q4_1","q5_1","q4k"};
  int R=1152,C=6912; int only=argc>1?atoi(argv[1]):-1; int NT=argc>2?atoi(argv[2]):128;
  const wisp_i8_kernels *k=wisp_i8_kernels_get();
  if(getenv("SET")){const wisp_i8_kernels*sets[4];int can[4];int ns=wisp_i8_kernels_all(sets,can,4);for(int i=0;i<ns;i++)if(!strcmp(sets[i]->name,getenv("SET")))k=sets[i];}
  float *x=malloc(sizeof(float)*NT*C); for(int i=0;i<NT*C;i++) x[i]=(float)(rnd()%2001)/1000.0f-1;
  float *y=malloc(sizeof(float)*NT*R), *scr=malloc(sizeof(float)*WISP_I8_SCRATCH(C)), *row=malloc(sizeof(float)*C);
  for(int ti=0;ti<7;ti++){ if(only>=0&&ti!=only)continue;
    const wisp_quant_traits*tr=wisp_quant_traits_of(types[ti]);
    size_t bytes=(size_t)R*(C/tr->block)*tr->block_bytes; uint8_t*q=malloc(bytes);
    for(size_t i=0;i<bytes;i++)q[i]=rnd();
    size_t nblk=(size_t)R*(C/tr->block);
    for(size_t b=0;b<nblk;b++){ uint16_t d=wisp_f32_to_f16(0.01f); uint8_t*blk=q+b*tr->block_bytes;
      int at= types[ti]==WISP_W_Q6K?208: types[ti]==WISP_W_Q3K?108: types[ti]==WISP_W_Q2K?80:0;
      memcpy(blk+at,&d,2); if(types[ti]==WISP_W_Q2K||types[ti]==WISP_W_Q5K||types[ti]==WISP_W_Q4K||types[ti]==WISP_W_Q4_1||types[ti]==WISP_W_Q5_1) memcpy(blk+at+2,&d,2);}
    wisp_matrix m={.type=types[ti],.rows=R,.cols=C,.q=q};
    uint8_t*q8=malloc(wisp_q8_0_bytes(R,C));
    for(int r=0;r<R;r++){wisp_matrix_row_f32(&m,r,row); wisp_quantize_q8_0_rows(row,1,C,q8+(size_t)r*wisp_q8_0_bytes(1,C));}
    wisp_matrix m8={.type=WISP_W_Q8_0,.rows=R,.cols=C,.q=q8};
    for(int ph=0;ph<2;ph++){ int n=ph?NT:1; if(!ph&&NT!=128)continue; wisp_i8_act a={0}; wisp_i8_act_reserve(&a,n,C); a.layout=WISP_I8_NATURAL; k->quantize(x,0,n,&a);
      int per= n>1?64:144; int reps=n>1?3:20;
      double to=run(k,&m,&a,n,y,scr,per,reps), t8=run(k,&m8,&a,n,y,scr,per,reps), t2=run(k,&m,&a,n,y,scr,per,reps), t82=run(k,&m8,&a,n,y,scr,per,reps);
      printf("%s %s n=%d own %.3f ms (%.3f)  q8copy %.3f ms (%.3f)  ratio %.2f\n",k->name,names[ti],n,to*1e3,t2*1e3,t8*1e3,t82*1e3,(to<t2?to:t2)/(t8<t82?t8:t82));
      wisp_i8_act_free(&a);}
    free(q);free(q8);}
  return 0;}
