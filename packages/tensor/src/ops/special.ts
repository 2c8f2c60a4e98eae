// erf for f32 work: W. J. Cody's rational Chebyshev approximations (Math. Comp. 1969),
// accurate to ~1e-15 in double, far beyond f32 needs.

const A = [3.161123743870565, 113.86415415105016, 377.485237685302, 3209.3775891384694, 0.18577770618460315];
const B = [23.601290952344122, 244.02463793444417, 1282.6165260773723, 2844.236833439171];
const C = [
  0.5641884969886701, 8.883149794388377, 66.11919063714163, 298.6351381974001, 881.952221241769, 1712.0476126340707,
  2051.0783778260716, 1230.3393547979972, 2.1531153547440383e-8,
];
const D = [
  15.744926110709835, 117.6939508913125, 537.1811018620099, 1621.3895745666903, 3290.7992357334597, 4362.619090143247,
  3439.3676741437216, 1230.3393548037495,
];
const P = [
  0.30532663496123236, 0.36034489994980445, 0.12578172611122926, 0.016083785148742275, 6.587491615298378e-4,
  0.016315387137302097,
];
const Q = [2.568520192289822, 1.8729528499234604, 0.5279051029514285, 0.06051834131244132, 0.0023352049762686918];
const SQRPI = 0.5641895835477563;

export function erf(x: number): number {
  const y = Math.abs(x);
  if (y <= 0.46875) {
    const z = y > 1.11e-16 ? y * y : 0;
    let num = A[4] * z;
    let den = z;
    for (let i = 0; i < 3; i++) {
      num = (num + A[i]) * z;
      den = (den + B[i]) * z;
    }
    return (x * (num + A[3])) / (den + B[3]);
  }
  let r: number;
  if (y <= 4) {
    let num = C[8] * y;
    let den = y;
    for (let i = 0; i < 7; i++) {
      num = (num + C[i]) * y;
      den = (den + D[i]) * y;
    }
    r = (num + C[7]) / (den + D[7]);
  } else {
    if (y >= 6) return x > 0 ? 1 : -1;
    const z = 1 / (y * y);
    let num = P[5] * z;
    let den = z;
    for (let i = 0; i < 4; i++) {
      num = (num + P[i]) * z;
      den = (den + Q[i]) * z;
    }
    r = (z * (num + P[4])) / (den + Q[4]);
    r = (SQRPI - r) / y;
  }
  const ysq = Math.trunc(y * 16) / 16;
  const del = (y - ysq) * (y + ysq);
  r *= Math.exp(-ysq * ysq) * Math.exp(-del);
  const erfc = r;
  return x > 0 ? 1 - erfc : erfc - 1;
}
