"""Constructor templates of `planc.frozen`, one for each number of fields up to 32.

Written by `python -m planc.frozen` from `planc.frozen.template_source`; do not edit.
"""

# Each constructor's own, in the globals `planc.frozen` gives its copy.
_new = _open = _post_init = None


def new_0(cls):
    self = _new(_open)
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_1(cls, _0):
    self = _new(_open)
    self._0 = _0
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_2(cls, _0, _1):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_3(cls, _0, _1, _2):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_4(cls, _0, _1, _2, _3):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_5(cls, _0, _1, _2, _3, _4):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_6(cls, _0, _1, _2, _3, _4, _5):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_7(cls, _0, _1, _2, _3, _4, _5, _6):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_8(cls, _0, _1, _2, _3, _4, _5, _6, _7):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_9(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_10(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_11(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_12(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_13(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_14(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_15(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_16(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_17(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_18(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_19(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_20(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_21(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_22(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_23(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_24(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_25(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_26(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_27(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_28(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    self._27 = _27
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_29(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    self._27 = _27
    self._28 = _28
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_30(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    self._27 = _27
    self._28 = _28
    self._29 = _29
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_31(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    self._27 = _27
    self._28 = _28
    self._29 = _29
    self._30 = _30
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self


def new_32(cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15,
        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31):
    self = _new(_open)
    self._0 = _0
    self._1 = _1
    self._2 = _2
    self._3 = _3
    self._4 = _4
    self._5 = _5
    self._6 = _6
    self._7 = _7
    self._8 = _8
    self._9 = _9
    self._10 = _10
    self._11 = _11
    self._12 = _12
    self._13 = _13
    self._14 = _14
    self._15 = _15
    self._16 = _16
    self._17 = _17
    self._18 = _18
    self._19 = _19
    self._20 = _20
    self._21 = _21
    self._22 = _22
    self._23 = _23
    self._24 = _24
    self._25 = _25
    self._26 = _26
    self._27 = _27
    self._28 = _28
    self._29 = _29
    self._30 = _30
    self._31 = _31
    if _post_init is not None:
        _post_init(self)
    self.__class__ = cls
    return self
